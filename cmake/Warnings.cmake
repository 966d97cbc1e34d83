# gpuhost_warnings(target): the project's warning set; errors when GPUHOST_WERROR is on (CI).
function(gpuhost_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Wcast-align -Wunused -Woverloaded-virtual -Wimplicit-fallthrough)
  # GCC 12 reports -Wrestrict false positives inside libstdc++'s std::string at -O2/-O3
  # (https://gcc.gnu.org/bugzilla/show_bug.cgi?id=105329); they are not in our code.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
  # Unity builds (CMAKE_UNITY_BUILD, on in every preset) make each .cc an included file, so GCC
  # takes a class's State that holds a type from the .cc's anonymous namespace for a header's
  # class with internal-linkage fields. In one translation unit that is harmless.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
  endif()
  if(GPUHOST_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
