# Quantization lab (issue 4): quantize, imatrix, bench.
hone_module_sources(QUANT_SRCS quant)
add_library(hone_quant STATIC ${QUANT_SRCS})
target_link_libraries(hone_quant PUBLIC hone_engine hone_hw hone_tune hone_util nlohmann_json::nlohmann_json PRIVATE Threads::Threads)
target_link_libraries(hone PRIVATE hone_quant)
