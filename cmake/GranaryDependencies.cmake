# Every third-party dependency comes from Debian's packages; scripts/setup.sh installs
# them. Target names and quirks are recorded in docs/development.md.
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(cpprestsdk CONFIG REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)          # 0.7 exports plain `yaml-cpp`
find_package(prometheus-cpp CONFIG REQUIRED)    # no version: Debian's config rejects one
find_package(civetweb CONFIG REQUIRED)          # HTTP endpoints (/metrics, /healthz)
find_package(RocksDB CONFIG REQUIRED)           # use RocksDB::rocksdb-shared
find_package(Protobuf REQUIRED)                 # module mode, for protobuf_generate
find_package(gRPC CONFIG REQUIRED)
find_package(CURL REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(CLI11 CONFIG REQUIRED)            # the binaries' flags (header-only)
find_package(pugixml CONFIG REQUIRED)          # the S3 listing's XML
pkg_check_modules(FUSE3 REQUIRED IMPORTED_TARGET fuse3)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
if(GRANARY_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
endif()
if(GRANARY_BUILD_BENCH)
  find_package(benchmark CONFIG REQUIRED)
endif()
