# hw tests: see tests/CMakeLists.txt for hone_test(). Fixture trees imitating
# /proc and /sys live in tests/fixtures/sysfs/<machine>/.
hone_test(hw_tests ${SRC}/hw/probe_test.cc ${SRC}/hw/sysfs_test.cc LIBS hone_hw)
