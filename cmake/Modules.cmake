# Conventions shared by every module.
#
#   kvroute_module(<name> SOURCES a.cc b.cc DEPS kvroute_common ...)
#       a static library kvroute_<name>; include paths are rooted at src/ so code writes
#       #include "kv/keys/block_key.h".
#   kvroute_test(<name> SOURCES a_test.cc ... DEPS kvroute_<name> ...)
#       a GoogleTest binary kvroute_<name>_test, registered with CTest (label "unit").

set(KVROUTE_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wno-missing-field-initializers)
# GCC 12's -Wmaybe-uninitialized reports moves of std::optional members inside std::variant
# alternatives that no path reaches (GCC PR 105593 family): kv::KvEvent tripped it at every
# push_back once BlockStored gained its extra keys (src/engine/scheduler.cc and
# src/bench/compare.cc worked around single sites before). -Wuninitialized (the definite
# case) stays on, and the ASan/UBSan build runs every unit test.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  list(APPEND KVROUTE_WARNINGS -Wno-maybe-uninitialized)
endif()
if(KVROUTE_WERROR)
  list(APPEND KVROUTE_WARNINGS -Werror)
endif()

add_library(kvroute_options INTERFACE)
target_compile_options(kvroute_options INTERFACE ${KVROUTE_WARNINGS})
target_include_directories(kvroute_options INTERFACE ${PROJECT_SOURCE_DIR}/src)
target_compile_definitions(kvroute_options INTERFACE
  BOOST_ASIO_SEPARATE_COMPILATION BOOST_BEAST_SEPARATE_COMPILATION
  BOOST_ASIO_NO_DEPRECATED BOOST_JSON_NO_LIB=0
  KVROUTE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
if(KVROUTE_SANITIZE)
  target_compile_options(kvroute_options INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(kvroute_options INTERFACE -fsanitize=address,undefined)
endif()
if(KVROUTE_TSAN)
  # -O1: TSan's slowdown on top of -O0 makes the concurrency tests crawl; frames stay usable.
  target_compile_options(kvroute_options INTERFACE -fsanitize=thread -O1 -fno-omit-frame-pointer)
  target_link_options(kvroute_options INTERFACE -fsanitize=thread)
endif()

function(kvroute_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(kvroute_${name} STATIC ${ARG_SOURCES})
  target_link_libraries(kvroute_${name} PUBLIC kvroute_options ${ARG_DEPS})
endfunction()

include(GoogleTest)
function(kvroute_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(kvroute_${name}_test ${ARG_SOURCES})
  target_link_libraries(kvroute_${name}_test PRIVATE kvroute_options ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  gtest_discover_tests(kvroute_${name}_test PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)
  set_property(GLOBAL APPEND PROPERTY KVROUTE_UNIT_TESTS kvroute_${name}_test)
endfunction()
