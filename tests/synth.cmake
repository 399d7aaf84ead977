# synth tests: see tests/CMakeLists.txt for hone_test()
hone_test(synth_tests ${SRC}/synth/synth_test.cc LIBS hone_synth ggml::ggml)
