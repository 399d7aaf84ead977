hone_test(engine_tests
  ${SRC}/engine/utf8_test.cc
  ${SRC}/engine/sampler_test.cc
  ${SRC}/engine/model_test.cc
  ${SRC}/engine/memory_estimate_test.cc
  ${SRC}/engine/generator_test.cc
  ${SRC}/engine/drafter_test.cc
  ${SRC}/engine/kv_stream_test.cc
  ${SRC}/engine/chat_test.cc
  LIBS hone_engine llama ggml::ggml)
