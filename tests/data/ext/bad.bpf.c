// not C: for E_EXT_PARSE
static int broken(int x {
	return x; }
