# Sourced by the fuzz scripts (run_fuzz.sh): sets ABSL_LINK to the -l flags of
# the Abseil libraries a fuzz target may need, limited to those this Debian's
# abseil ships (the set differs between releases). The targets build from
# source with clang, outside CMake, so they name the libraries themselves.
ABSL_LINK=()
for lib in absl_status absl_statusor absl_strings absl_str_format_internal absl_synchronization \
           absl_time absl_time_zone absl_cord absl_cord_internal absl_cordz_info absl_cordz_functions \
           absl_cordz_handle absl_crc32c absl_crc_cord_state absl_crc_internal absl_crc_cpu_detect \
           absl_hash absl_city absl_low_level_hash absl_raw_hash_set absl_int128 absl_strings_internal \
           absl_throw_delegate absl_raw_logging_internal absl_base absl_spinlock_wait absl_malloc_internal \
           absl_stacktrace absl_symbolize absl_debugging_internal absl_demangle_internal \
           absl_graphcycles_internal absl_exponential_biased absl_log_severity absl_strerror \
           absl_bad_optional_access absl_bad_variant_access; do
  if ls /usr/lib/*/lib"$lib".so >/dev/null 2>&1 || ls /usr/lib/lib"$lib".so >/dev/null 2>&1; then
    ABSL_LINK+=("-l$lib")
  fi
done
