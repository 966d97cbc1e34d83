#include "cli/cli.h"

int main(int argc, char** argv) { return gpuhost::cli::run(argc, argv); }
