# Writes the build's facts (version, git commit, build type) into a header at every build, so
# that a binary rebuilt after a commit names that commit (configure_file at configure time kept
# the commit of the first `cmake`, and every JSON file written later carried it):
#
#   cmake -DSOURCE_DIR=... -DINPUT=build_info.hpp.in -DOUTPUT=generated/accumbench_build_info.hpp
#         -DCMAKE_BUILD_TYPE=Release -DPROJECT_VERSION=0.1.0 -P cmake/build_info.cmake
#
# configure_file leaves the header untouched when its text is unchanged, so nothing recompiles
# unless the commit moved. A tree with uncommitted changes to tracked files appends "-dirty"; a
# copy without git (the GPU machine's working tree) says "unknown".
cmake_minimum_required(VERSION 3.18)

foreach(variable SOURCE_DIR INPUT OUTPUT)
  if(NOT DEFINED ${variable} OR "${${variable}}" STREQUAL "")
    message(FATAL_ERROR "build_info.cmake: -D${variable}=... is required")
  endif()
endforeach()

execute_process(COMMAND git rev-parse --short=12 HEAD
                WORKING_DIRECTORY "${SOURCE_DIR}"
                OUTPUT_VARIABLE ACCUMBENCH_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE status ERROR_QUIET)
if(NOT status EQUAL 0 OR NOT ACCUMBENCH_GIT_COMMIT)
  set(ACCUMBENCH_GIT_COMMIT "unknown")
else()
  execute_process(COMMAND git diff-index --quiet HEAD --
                  WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE changed ERROR_QUIET)
  if(changed EQUAL 1)
    string(APPEND ACCUMBENCH_GIT_COMMIT "-dirty")
  endif()
endif()
configure_file("${INPUT}" "${OUTPUT}" @ONLY)
