# gpuhost_embed(OUT_VAR NAMESPACE ns FILES a b ...): generates one .cc holding every file as a byte
# array plus a lookup table `const EmbeddedFile* ns::find_embedded(std::string_view name)` and
# `std::span<const EmbeddedFile> ns::embedded_files()`. The list of generated sources is returned in OUT_VAR.
function(gpuhost_embed out_var)
  cmake_parse_arguments(ARG "" "NAMESPACE;NAME" "FILES" ${ARGN})
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${ARG_NAME}.cc)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DNAMESPACE=${ARG_NAMESPACE} "-DFILES=${ARG_FILES}"
            -P ${PROJECT_SOURCE_DIR}/cmake/EmbedScript.cmake
    DEPENDS ${ARG_FILES} ${PROJECT_SOURCE_DIR}/cmake/EmbedScript.cmake
    COMMENT "Embedding ${ARG_NAME}"
    VERBATIM)
  set(${out_var} ${out} PARENT_SCOPE)
endfunction()
