# gpuhost_warnings(target): the project's warning set; errors when GPUHOST_WERROR is on (CI).
function(gpuhost_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Wcast-align -Wunused -Woverloaded-virtual -Wimplicit-fallthrough)
  if(GPUHOST_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
