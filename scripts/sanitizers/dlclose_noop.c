/* Preloaded by scripts/sanitize.sh into the ASan run: dlclose does nothing.
 * Open MPI dlcloses its mca_* components in MPI_Finalize, after which
 * LeakSanitizer reports what they kept as "<unknown module>" and no
 * suppression can name it. With them still mapped, lsan.supp matches by
 * library. Nothing in Strata unloads a library it needs. */
int dlclose(void* handle) {
  (void)handle;
  return 0;
}
