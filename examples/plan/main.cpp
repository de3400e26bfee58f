// Placeholder so the memscale-plan target exists; the real tool replaces this file.
int main() { return 0; }
