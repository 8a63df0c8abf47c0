//! The on-disk kernel cache: one compilation per (source, flags, compiler), shared between
//! `Compiler` values and safe under concurrent use. The test runs in a process of its own, so
//! that no other test moves the process-wide compiler-invocation counter meanwhile.

use crate::common::in_own_process;
use teml::runtime::{Compiler, Flags, compiler_invocations};

const SOURCE: &str = "void teml_entry(void **args) { double *a = args[0]; a[0] += 1.0; }\n";

#[test]
fn the_same_source_is_compiled_once() {
    in_own_process("runtime_cache::the_same_source_is_compiled_once", &[], || {
        let dir = tempfile::tempdir().unwrap();
        let compiler = Compiler::detect().unwrap_or_else(|e| panic!("{e}")).with_cache_dir(dir.path());
        let before = compiler_invocations();

        let first = compiler.compile(SOURCE, &Flags::default()).unwrap_or_else(|e| panic!("{e}"));
        assert!(!first.cached);
        assert!(first.so_path.is_file());
        assert_eq!(std::fs::read_to_string(&first.c_path).unwrap(), SOURCE);
        assert_eq!(compiler_invocations() - before, 1);

        let second = compiler.compile(SOURCE, &Flags::default()).unwrap();
        assert!(second.cached);
        assert_eq!(second.so_path, first.so_path);
        assert_eq!(compiler_invocations() - before, 1, "a cached kernel must not be recompiled");

        // Another compiler value on the same cache (another process, say) finds it too.
        let again = Compiler::detect().unwrap().with_cache_dir(dir.path());
        assert!(again.compile(SOURCE, &Flags::default()).unwrap().cached);
        assert_eq!(compiler_invocations() - before, 1);

        // Other flags, or another source, are another kernel.
        let o1 = Flags { opt: vec!["-O1".into()] };
        let other = compiler.compile(SOURCE, &o1).unwrap();
        assert!(!other.cached);
        assert_ne!(other.so_path, first.so_path);
        let changed = compiler.compile(&SOURCE.replace("1.0", "2.0"), &o1).unwrap();
        assert!(!changed.cached);
        assert_eq!(compiler_invocations() - before, 3);
        assert_eq!(compiler.cache_key(SOURCE, &o1).len(), 64);

        // Concurrent compilations of one new source all succeed and leave one library behind.
        let source = SOURCE.replace("1.0", "3.0");
        let paths: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> =
                (0..3).map(|_| s.spawn(|| compiler.compile(&source, &o1).unwrap().so_path)).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(paths.iter().all(|p| p == &paths[0]));

        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names.len(), 8, "four kernels, each a .c and a .so, no temporary files: {names:?}");
        assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
    });
}
