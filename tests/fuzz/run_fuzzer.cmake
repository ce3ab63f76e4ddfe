# Runs dsl_fuzzer for a bounded time on a corpus in the build tree, seeded with the .mxk files
# of the SEEDS and MORE_SEEDS folders (libFuzzer writes new inputs into its first corpus folder,
# never into the sources).
# Usage: cmake -DFUZZER=... -DSEEDS=... [-DMORE_SEEDS=...] -DWORK_DIR=... -DDICT=...
#          -P run_fuzzer.cmake
set(corpus ${WORK_DIR}/corpus)
file(MAKE_DIRECTORY ${corpus})
foreach(dir ${SEEDS} ${MORE_SEEDS})
  file(GLOB seeds ${dir}/*.mxk)
  file(COPY ${seeds} DESTINATION ${corpus})
endforeach()
execute_process(
  COMMAND ${FUZZER} ${corpus} -dict=${DICT} -max_total_time=60 -timeout=5 -rss_limit_mb=2048
          -max_len=16384 -artifact_prefix=${WORK_DIR}/ -print_final_stats=1
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "dsl_fuzzer failed (exit ${result}); the input that failed is in ${WORK_DIR}")
endif()
