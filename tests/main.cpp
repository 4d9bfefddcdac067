// The CPU tests' entry point: the Catch2 session over every test case linked in.
#include "catch_session.h"

int main(int argc, char* argv[]) { return run_catch_session(argc, argv); }
