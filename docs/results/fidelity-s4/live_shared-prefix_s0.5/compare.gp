# Renders compare.png and compare.svg: gnuplot compare.gp
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -30
set key top left
set grid ytics
set ylabel 'tokens/s'
set title 'Router comparison: goodput at 30 tok/s/user (per GPU) and output throughput'
set terminal png size 1100,600 noenhanced
set output 'compare.png'
plot 'compare_goodput.dat' using 2:xtic(1) title 'goodput/GPU', '' using 3 title 'output tok/s'
set terminal svg size 1100,600 noenhanced
set output 'compare.svg'
plot 'compare_goodput.dat' using 2:xtic(1) title 'goodput/GPU', '' using 3 title 'output tok/s'
