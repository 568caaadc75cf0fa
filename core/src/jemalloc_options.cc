// jemalloc's options for the programs that link it (strata_link_jemalloc,
// cmake/strata.cmake), read by jemalloc at its first allocation. The
// symbol is inert under any other allocator.
//
// thp:always: jemalloc advises every mapping onto transparent huge pages.
// Planning writes each op once into fresh memory, and a 4 KiB page fault
// costs about 13 us on a VM: planning 4096 layers spent half its time in
// faults and page clears. With 2 MiB pages the one-shot plan of 4096
// layers takes 0.53 s instead of 1.7 s, and the planning rate per op stays
// flat from 16 to 4096 layers (docs/performance.md, plan_bench). The cost
// is resident memory rounded up to 2 MiB per arena mapping.
extern "C" {
// NOLINTNEXTLINE: the name and type jemalloc looks up.
const char* malloc_conf = "thp:always";
}
