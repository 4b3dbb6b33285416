// The web console: the HTTP facade over the public API and the single-page app's files.
export {};
