// Consumer smoke test: memscale's headers are usable in constant expressions via add_subdirectory.
#include <memscale/bytes.hpp>

static_assert(memscale::bytes{1} + memscale::bytes{1} == memscale::bytes{2});

int main() { return 0; }
