// stb_image_write's implementation, compiled once for the tests that write PNG files
// (test_image_folder.cpp, test_predict.cpp, test_data_fetch.cpp): each of them includes only
// its declarations. The library reads images with stb_image (datasets/image_io.cpp) and never
// writes one.
#define STB_IMAGE_WRITE_IMPLEMENTATION
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb_image_write.h>
#pragma GCC diagnostic pop
