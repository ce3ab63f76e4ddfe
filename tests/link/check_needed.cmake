# cmake -DREADELF=<readelf> -DRUNTIME=<libmxfp6rt.so> [-DALLOW_SQLITE=ON] -P check_needed.cmake <binary>...
#
# The link boundaries of docs/architecture.md section 2, read from the binaries themselves: no file may
# need LLVM, MLIR, clang, gRPC, protobuf, SQLite, or a GPU driver (those are dlopen'ed), and the
# runtime may need nothing beyond the C runtime, so a new dependency is a deliberate decision.
# -DALLOW_SQLITE=ON: the database side (mxfp6-db, the tuner), whose job SQLite is.
# -DALLOW_GRPC=ON: the client library training processes load (gRPC, protobuf and SQLite).
if(ALLOW_GRPC)
  # The client library: gRPC to the server and SQLite for the embedded mode, never LLVM or a driver.
  set(forbidden "^lib(LLVM|MLIR|clang|cuda|amdhip64|hsa-runtime)")
elseif(ALLOW_SQLITE)
  set(forbidden "^lib(LLVM|MLIR|clang|grpc|gpr|protobuf|cuda|amdhip64|hsa-runtime)")
else()
  set(forbidden "^lib(LLVM|MLIR|clang|grpc|gpr|protobuf|sqlite3|cuda|amdhip64|hsa-runtime)")
endif()
set(runtime_allowed "^(libc|libm|libdl|libpthread|librt|libstdc\\+\\+|libgcc_s)\\.so|^ld-linux")

function(needed_of file out)
  execute_process(COMMAND ${READELF} -d ${file} OUTPUT_VARIABLE dynamic ERROR_VARIABLE error
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${READELF} -d ${file} failed: ${error}")
  endif()
  string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*\\[[^]\n]+\\]" lines "${dynamic}")
  set(names "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE ".*\\[([^]]+)\\]" "\\1" name "${line}")
    list(APPEND names ${name})
  endforeach()
  set(${out} ${names} PARENT_SCOPE)
endfunction()

set(files ${RUNTIME})
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(found_script)
    list(APPEND files ${CMAKE_ARGV${i}})
  elseif(CMAKE_ARGV${i} MATCHES "check_needed\\.cmake$")
    set(found_script TRUE)
  endif()
endforeach()

set(failures "")
foreach(file IN LISTS files)
  if(NOT EXISTS ${file})
    # ctest does not build; a binary that is missing is a check that did not happen.
    list(APPEND failures "${file}: not built, so not checked (build all targets first)")
    continue()
  endif()
  needed_of(${file} needed)
  if(NOT needed)
    # Every dynamically linked binary needs libc; none found means the parse broke.
    list(APPEND failures "${file}: no NEEDED entries read (readelf output changed?)")
  endif()
  message(STATUS "${file}: ${needed}")
  foreach(name IN LISTS needed)
    if(name MATCHES "${forbidden}")
      list(APPEND failures "${file} needs ${name}")
    elseif(file STREQUAL RUNTIME AND NOT name MATCHES "${runtime_allowed}")
      list(APPEND failures "${file} needs ${name} (the runtime may only need the C runtime)")
    endif()
  endforeach()
endforeach()

if(failures)
  list(JOIN failures "\n  " text)
  message(FATAL_ERROR "link boundary violated:\n  ${text}")
endif()
list(LENGTH files count)
message(STATUS "link boundary holds for ${count} binaries")
