set terminal svg size 720,600
set output 'accuracy.svg'
set logscale xy
set xlabel 'measured (GB)'
set ylabel 'estimated (GB)'
set key bottom right
set grid
plot x title 'exact' lw 1 lc rgb '#888888', 1.1*x title '+10%' dt 2 lc rgb '#bbbbbb', 0.9*x title '-10%' dt 2 lc rgb '#bbbbbb', '< grep ^cpu_traced_dev accuracy.dat' using 2:3 title 'CPU traced' pt 7 ps 0.6, '< grep ^gpu_published_dev accuracy.dat' using 2:3 title 'GPU published' pt 5 ps 0.6, '< grep ^cpu_traced_extra accuracy.dat' using 2:3 title 'CPU traced (extra)' pt 6 ps 0.6, '< grep ^cpu_traced_t5 accuracy.dat' using 2:3 title 'CPU traced (T5)' pt 4 ps 0.6, '< grep ^cpu_traced_families accuracy.dat' using 2:3 title 'CPU traced (config.json families)' pt 12 ps 0.6, '< grep ^cpu_traced_families_2025 accuracy.dat' using 2:3 title 'CPU traced (2025 families)' pt 14 ps 0.6, '< grep ^cpu_traced_frameworks accuracy.dat' using 2:3 title 'CPU traced (frameworks)' pt 3 ps 0.6, '< grep ^cpu_traced_lora accuracy.dat' using 2:3 title 'CPU traced (LoRA)' pt 8 ps 0.6, '< grep ^cpu_traced_vision accuracy.dat' using 2:3 title 'CPU traced (vision)' pt 10 ps 0.6, '< grep ^cpu_traced_inference accuracy.dat' using 2:3 title 'CPU traced generate()' pt 13 ps 0.6, '< grep ^gpu_measured_h100 accuracy.dat' using 2:3 title 'GPU measured (H100)' pt 9 ps 0.6, '< grep ^gpu_heldout_h100 accuracy.dat' using 2:3 title 'GPU held out (H100)' pt 11 ps 0.6, '< grep ^memscale_aggressive accuracy.dat' using 2:3 title 'MemScale AGGRESSIVE' pt 9 ps 0.9
