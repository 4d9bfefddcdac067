#pragma once
// Catch2's session (its command line, then every test case linked in), run from a main() of
// the test executables' own. Catch2 declares its Session only where its implementation is
// compiled, catch_impl.cpp, which both executables share.
int run_catch_session(int argc, char* argv[]);
