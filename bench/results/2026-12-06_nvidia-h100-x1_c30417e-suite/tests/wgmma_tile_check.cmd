mkdir -p build && nvcc -O3 -std=c++17 -arch=sm_90a -Isrc/cuda -Iinclude tests/gpu/wgmma_tile_check.cu -lcublas -o build/wgmma_tile_check  && build/wgmma_tile_check
