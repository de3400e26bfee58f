# memscale_warnings.cmake: warning flags for memscale's own tests, examples and benchmarks.
#
# Never applied to the INTERFACE library targets: warnings are the consumer's choice.
# MEMSCALE_WERROR (default ON at top level) turns them into errors.

include_guard(GLOBAL)

option(MEMSCALE_WERROR "Treat warnings as errors in memscale's own tests, examples and benchmarks" ${PROJECT_IS_TOP_LEVEL})

function(memscale_set_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wconversion -Wshadow)
    if(MEMSCALE_WERROR)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
    # g++ 12 at -O2/-O3 reports a false -Wrestrict inside libstdc++'s std::string
    # operator+ (GCC bug 105651, fixed in 13); keep it a warning, not an error.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
      target_compile_options(${target} PRIVATE -Wno-error=restrict)
    endif()
  endif()
endfunction()
