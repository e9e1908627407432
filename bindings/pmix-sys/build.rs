//! Generates the bindings from the system's `pmix.h`, located with pkg-config.

use std::env;
use std::path::PathBuf;

fn main() {
    let lib = pkg_config::Config::new()
        .atleast_version("4.0")
        .probe("pmix")
        .unwrap_or_else(|e| {
            panic!(
                "pmix-sys needs the OpenPMIx development files (pkg-config module `pmix`, \
                 version 4 or later). On Debian: apt-get install -y libpmix-dev pkg-config\n{e}"
            )
        });
    let mut builder = bindgen::Builder::default()
        .header_contents("wrapper.h", "#include <pmix.h>\n")
        .allowlist_function("PMIx_.*")
        .allowlist_type("pmix_.*")
        .allowlist_var("PMIX_.*")
        .generate_cstr(true)
        .use_core()
        .derive_default(true)
        .layout_tests(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for path in &lib.include_paths {
        builder = builder.clang_arg(format!("-I{}", path.display()));
    }
    let bindings = builder
        .generate()
        .expect("bindgen could not parse pmix.h (is libclang-dev installed?)");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("cannot write bindings.rs");
}
