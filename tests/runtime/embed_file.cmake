# cmake -DINPUT=<file> -DOUTPUT=<file.cpp> -DSYMBOL=<name> -P embed_file.cmake
# Writes `const unsigned char <name>_data[]` (with a trailing NUL not counted) and
# `const size_t <name>_size` so a test binary carries its code objects: the GPU machine it runs
# on has neither the sources nor ptxas. A missing INPUT gives an empty object.
if(EXISTS "${INPUT}")
  file(READ "${INPUT}" hex HEX)
else()
  set(hex "")
endif()
string(LENGTH "${hex}" digits)
math(EXPR size "${digits} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE "${OUTPUT}"
  "#include <cstddef>\n"
  "extern const unsigned char ${SYMBOL}_data[] = {${bytes}0x00};\n"
  "extern const size_t ${SYMBOL}_size = ${size};\n")
