# Every dependency is a Debian 12 package installed by scripts/setup.sh.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

# Boost 1.81: Asio + Beast are compiled once (see src/net/asio_impl.cc), JSON from its library.
set(Boost_NO_WARN_NEW_VERSIONS ON)
find_package(Boost 1.81 EXACT REQUIRED COMPONENTS json)
find_package(OpenSSL REQUIRED)
find_package(spdlog REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 REQUIRED)
find_package(cppzmq REQUIRED)
find_package(prometheus-cpp REQUIRED COMPONENTS core)
find_package(GTest REQUIRED)
find_package(benchmark QUIET)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(CBOR REQUIRED IMPORTED_TARGET libcbor)

# libmpack ships a header and a shared library but no pkg-config file.
find_path(MPACK_INCLUDE_DIR NAMES mpack.h PATH_SUFFIXES mpack REQUIRED)
find_library(MPACK_LIBRARY NAMES mpack REQUIRED)
add_library(kvroute_dep_mpack INTERFACE)
target_include_directories(kvroute_dep_mpack SYSTEM INTERFACE ${MPACK_INCLUDE_DIR})
target_link_libraries(kvroute_dep_mpack INTERFACE ${MPACK_LIBRARY})
