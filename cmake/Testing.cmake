# GoogleTest: the host build uses Debian's libgtest-dev; the MinGW cross build compiles Debian's
# googletest sources (/usr/src/googletest) with the cross compiler, since no Windows binaries exist.
if(CMAKE_CROSSCOMPILING)
  set(GPUHOST_GTEST_SOURCE_DIR /usr/src/googletest CACHE PATH "googletest sources for cross builds")
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  set(gtest_disable_pthreads OFF CACHE BOOL "" FORCE)
  add_subdirectory(${GPUHOST_GTEST_SOURCE_DIR} ${CMAKE_BINARY_DIR}/googletest EXCLUDE_FROM_ALL SYSTEM)
else()
  find_package(GTest REQUIRED)
endif()

# unit_tests: every unit test binary and what it needs, without gpuhost and the integration
# tests' programs (the sanitizer build runs only these: scripts/test.sh).
add_custom_target(unit_tests)

# gpuhost_add_unit_test(name SOURCES ... LIBS ... [LABELS ...]): one test binary, one CTest test.
# Under the cross build CTest runs it through CMAKE_CROSSCOMPILING_EMULATOR (Wine).
function(gpuhost_add_unit_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src)
  gpuhost_warnings(${name})
  gpuhost_runtime_dlls(${name})
  add_test(NAME ${name} COMMAND ${name} --gtest_brief=1)
  add_dependencies(unit_tests ${name})
  set(labels unit ${ARG_LABELS})
  # GPUHOST_RUN_DIR: NVML readers register under it (gpu/nvml_hold.h), not in the host's /run/gpuhost.
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT 300
                       ENVIRONMENT "GPUHOST_TEST_DATA=${PROJECT_SOURCE_DIR}/tests;NO_COLOR=1;GPUHOST_RUN_DIR=${CMAKE_BINARY_DIR}/test-run")
endfunction()
