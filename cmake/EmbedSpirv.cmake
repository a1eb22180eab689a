# cmake -DSPV=in.spv -DOUT=out.c -DNAME=name -P EmbedSpirv.cmake
# Writes the SPIR-V words of SPV as a C array spv_NAME[] and its byte size.
file(READ ${SPV} hex HEX)
string(LENGTH "${hex}" nhex)
math(EXPR nbytes "${nhex} / 2")
# SPIR-V is little-endian 32-bit words: regroup 8 hex digits per word.
string(REGEX MATCHALL "(..)(..)(..)(..)" words "${hex}")
set(body "")
set(col 0)
foreach(w ${words})
  string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1u," w "${w}")
  string(APPEND body "${w}")
  math(EXPR col "${col} + 1")
  if(col EQUAL 8)
    string(APPEND body "\n")
    set(col 0)
  endif()
endforeach()
file(WRITE ${OUT} "/* Generated from ${NAME}.spv by cmake/EmbedSpirv.cmake. */\n#include <stddef.h>\n#include <stdint.h>\nconst uint32_t spv_${NAME}[] = {\n${body}\n};\nconst size_t spv_${NAME}_size = ${nbytes};\n")
