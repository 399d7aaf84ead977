# hw tests: see tests/CMakeLists.txt for hone_test()
