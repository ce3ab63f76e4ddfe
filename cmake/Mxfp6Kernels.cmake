# Precompiled code objects: mxfp6c run at build time over a DSL kernel, one code object (and its
# .json metadata) per configuration. Included by tests/gpu (build/gpu_kernels, and the op table's
# candidates in build/gpu_kernels/candidates) and bench (its extra objects there and in
# build/gpu_kernels/bench); needs the mxfp6c target, so only with MXFP6_BUILD_COMPILER.
include_guard(GLOBAL)

# A cubin when ptxas is installed, else PTX (the driver JITs it); decided once per configure.
find_program(MXFP6_PTXAS ptxas PATHS /usr/local/cuda/bin)
if(MXFP6_PTXAS)
  set_property(GLOBAL PROPERTY MXFP6_CODE_OBJECT_EMIT cubin)
else()
  set_property(GLOBAL PROPERTY MXFP6_CODE_OBJECT_EMIT ptx)
endif()

# mxfp6_code_objects(OUT_DIR dir OUTPUTS var FILE file KERNEL kernel CONFIGS config...):
# <dir>/<kernel>.sm_90.<config tag>.code for each configuration, the tag being the config with
# "," -> "_" and "=" dropped; FILE is relative to the repository root. The outputs are appended
# to the caller's list variable <var>, for the custom target that builds them.
function(mxfp6_code_objects)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "OUT_DIR;OUTPUTS;FILE;KERNEL" "CONFIGS")
  foreach(required OUT_DIR OUTPUTS FILE KERNEL CONFIGS)
    if(NOT arg_${required})
      message(FATAL_ERROR "mxfp6_code_objects: ${required} is required")
    endif()
  endforeach()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "mxfp6_code_objects: unexpected arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  get_property(emit GLOBAL PROPERTY MXFP6_CODE_OBJECT_EMIT)
  set(outputs ${${arg_OUTPUTS}})
  foreach(cfg IN LISTS arg_CONFIGS)
    string(REPLACE "," "_" tag "${cfg}")
    string(REPLACE "=" "" tag "${tag}")
    set(out ${arg_OUT_DIR}/${arg_KERNEL}.sm_90.${tag}.code)
    add_custom_command(
      OUTPUT ${out} ${out}.json
      COMMAND ${CMAKE_COMMAND} -E make_directory ${arg_OUT_DIR}
      COMMAND $<TARGET_FILE:mxfp6c> compile ${CMAKE_SOURCE_DIR}/${arg_FILE}
              --kernel ${arg_KERNEL} --target sm_90 --config ${cfg} --emit ${emit} -o ${out}
      DEPENDS mxfp6c ${CMAKE_SOURCE_DIR}/${arg_FILE}
      COMMENT "mxfp6c: ${arg_KERNEL} for sm_90 (${cfg})")
    list(APPEND outputs ${out})
  endforeach()
  set(${arg_OUTPUTS} ${outputs} PARENT_SCOPE)
endfunction()

# mxfp6_candidate_objects(OUT_DIR dir SHAPES file TARGETS targets STAMP var): every candidate code
# object of every plan family the shape set needs (ops/op_table.cpp), as `mxfp6c precompile
# --shapes FILE -o DIR` writes them (mxfp6_code_objects()'s names and metadata, refused, spilling
# and duplicate-code candidates pruned). One command for the whole set, since the op table decides
# the files; its output is a stamp, set in <var>. Objects whose bytes did not change are not
# rewritten. OUT_DIR must hold nothing else: no mxfp6_code_objects() output may go there.
function(mxfp6_candidate_objects)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "OUT_DIR;SHAPES;TARGETS;STAMP" "")
  foreach(required OUT_DIR SHAPES TARGETS STAMP)
    if(NOT arg_${required})
      message(FATAL_ERROR "mxfp6_candidate_objects: ${required} is required")
    endif()
  endforeach()
  file(GLOB _dsl CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels_dsl/*.mxk)
  set(stamp ${arg_OUT_DIR}.stamp)
  add_custom_command(
    OUTPUT ${stamp}
    COMMAND $<TARGET_FILE:mxfp6c> precompile --shapes ${CMAKE_SOURCE_DIR}/${arg_SHAPES} --targets ${arg_TARGETS}
            -o ${arg_OUT_DIR}
    COMMAND ${CMAKE_COMMAND} -E touch ${stamp}
    # mxfp6c holds the op table (ops/op_table.cpp is compiled into it).
    DEPENDS mxfp6c ${_dsl} ${CMAKE_SOURCE_DIR}/${arg_SHAPES}
    COMMENT "mxfp6c: the candidates of ${arg_SHAPES} for ${arg_TARGETS}")
  set(${arg_STAMP} ${stamp} PARENT_SCOPE)
endfunction()
