/* The resident launcher (launch-server.c): serves step starts on stdin/stdout until the runner goes. */
int serve(const char *self);
