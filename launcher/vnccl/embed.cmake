# embed.cmake: writes the bytes of IN as the C array NAME (NUL-terminated:
# the PTX text cuModuleLoadData takes) into OUT. cmake -DIN= -DOUT= -DNAME= -P.
file(READ ${IN} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE ${OUT} "// Generated from ${IN} by launcher/vnccl/embed.cmake: do not edit.\n"
                  "const unsigned char ${NAME}[] = {${bytes}0x00};\n")
