nvcc -std=c++17 -O2 -arch=sm_90 -Iinclude -o /tmp/ar_kernel_check  tests/gpu/ar_kernel_check.cu -Lbuild/lib -lfco -Xlinker -rpath=$PWD/build/lib && /tmp/ar_kernel_check 
