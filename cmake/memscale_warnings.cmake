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
  endif()
endfunction()
