# Writes a tiny model and runs gpu_bench_emulated on it with tiny sizes; fails
# if any step of the benchmark fails or its JSON lacks a figure.
file(MAKE_DIRECTORY ${WORK})
execute_process(COMMAND ${TINY} tiny-model --out ${WORK}/tiny.gguf --dtype Q4_1 --context 4096 RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kvfleet tiny-model failed")
endif()
execute_process(COMMAND ${BENCH} --model tiny=${WORK}/tiny.gguf --streams 1,4 --prefill-tokens 64 --contexts 300
                        --bandwidth-mib 16 --json ${WORK}/bench.json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gpu_bench_emulated failed: ${err}")
endif()
file(READ ${WORK}/bench.json json)
foreach(figure bandwidth attention_decode decode prefill)
  if(NOT json MATCHES "\"figure\": \"${figure}\"")
    message(FATAL_ERROR "bench.json has no ${figure} figure")
  endif()
endforeach()
