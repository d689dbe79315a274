int main() { return 0; }  // replaced by the command-line front end
