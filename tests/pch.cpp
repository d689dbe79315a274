// The translation unit that builds the tests' precompiled Catch2 header (tests/CMakeLists.txt).
