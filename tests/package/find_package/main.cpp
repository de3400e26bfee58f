// Consumer smoke test: the installed headers are found and usable in constant expressions.
#include <memscale/bytes.hpp>

#if defined(MEMSCALE_CONSUMER_ADAPTERS)
#if __has_include(<memscale/fmt.hpp>)
#include <memscale/fmt.hpp>
#endif
#if __has_include(<memscale/json.hpp>)
#include <memscale/json.hpp>
#endif
#endif

static_assert(memscale::bytes{1} + memscale::bytes{1} == memscale::bytes{2});

int main() { return 0; }
