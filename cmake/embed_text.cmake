# Writes a text file into a C++ header as one string constant, so that the file can be edited as
# what it is (a stylesheet) and still ship inside the binary. Run at build time, in the spirit of
# llama.cpp's scripts/xxd.cmake:
#
#   cmake -DINPUT=report.css -DOUTPUT=generated/report_css.hpp -DNAME=kReportCss
#         [-DNAMESPACE=accumbench::html] -P cmake/embed_text.cmake
#
# The constant is an ordinary literal with one source line per line of text, not a raw string, so
# that any text comes out byte for byte, one holding a raw string's closing `)delimiter"` too.
# Printable ASCII is kept as it is except `\`, `"` and `?` (no `??x` may read as a trigraph);
# every other byte is escaped: \n, \t, \r, else three octal digits (never longer, unlike \x, so
# a digit after it cannot join it). The file is read as hex bytes because file(READ) as text drops
# carriage returns.
cmake_minimum_required(VERSION 3.18)

foreach(variable INPUT OUTPUT NAME)
  if(NOT DEFINED ${variable} OR "${${variable}}" STREQUAL "")
    message(FATAL_ERROR "embed_text.cmake: -D${variable}=... is required")
  endif()
endforeach()

file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
set(literal "    \"")
set(closed FALSE)  # whether the last literal ended with the final newline
set(position 0)
while(position LESS hex_length)
  string(SUBSTRING "${hex}" ${position} 2 byte)
  math(EXPR code "0x${byte}")
  math(EXPR position "${position} + 2")
  if(code EQUAL 10)  # newline: ends the source line too, unless it is the last byte
    string(APPEND literal "\\n\"")
    if(position LESS hex_length)
      string(APPEND literal "\n    \"")
    else()
      set(closed TRUE)
    endif()
    continue()
  elseif(code EQUAL 9)
    set(piece "\\t")
  elseif(code EQUAL 13)
    set(piece "\\r")
  elseif(code EQUAL 34 OR code EQUAL 63 OR code EQUAL 92)  # " ? backslash
    string(ASCII ${code} character)
    set(piece "\\${character}")
  elseif(code GREATER_EQUAL 32 AND code LESS 127)
    string(ASCII ${code} piece)
  else()
    math(EXPR high "${code} / 64")
    math(EXPR middle "(${code} / 8) % 8")
    math(EXPR low "${code} % 8")
    set(piece "\\${high}${middle}${low}")
  endif()
  string(APPEND literal "${piece}")
endwhile()
if(NOT closed)  # empty, or no final newline
  string(APPEND literal "\"")
endif()

get_filename_component(input_name "${INPUT}" NAME)
set(header "// Generated from ${input_name} by cmake/embed_text.cmake; edit that file instead.\n")
string(APPEND header "#pragma once\n\n")
if(DEFINED NAMESPACE AND NOT "${NAMESPACE}" STREQUAL "")
  string(APPEND header "namespace ${NAMESPACE} {\n\n")
endif()
string(APPEND header "inline constexpr char ${NAME}[] =\n${literal};\n")
if(DEFINED NAMESPACE AND NOT "${NAMESPACE}" STREQUAL "")
  string(APPEND header "\n}  // namespace ${NAMESPACE}\n")
endif()
file(WRITE "${OUTPUT}" "${header}")
