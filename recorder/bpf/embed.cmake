# cmake -DIN=file.o -DOUT=file.h -DNAME=symbol -P embed.cmake: the bytes of IN as a C++ array in OUT.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE ${OUT} "// Generated from ${IN} by recorder/bpf/embed.cmake.\n#pragma once\ninline constexpr unsigned char ${NAME}[] = {${bytes}};\n")
