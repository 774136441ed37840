//! chainedge: an edge data plane for blockchain node fleets, on Pingora.

use chainedge::{app, cli};

use clap::Parser;

/// mimalloc: the proxy path allocates small short-lived buffers per request, where it
/// beats the system allocator (see bench/RESULTS.md).
#[global_allocator]
static GLOBAL: Mimalloc = Mimalloc;

/// mimalloc through its plain entry points whenever they already give the alignment
/// asked. The `mimalloc` crate's allocator calls the `_aligned` ones for every layout,
/// and mimalloc 3 takes their slow path (a generic search, then over-allocation) for any
/// block over 1 KiB whose size is not a power of two, even at alignment 8: about four
/// such blocks per proxied request (the boxed request future, 3.3 KiB, among them), ~350
/// instructions each (callgrind, docs/benchmarks.md#allocator-entry-points).
struct Mimalloc;

/// The alignment every mimalloc block has: block sizes are whole words, so a block of
/// 24 bytes is 8-aligned only (not the 16 glibc's `malloc` gives); mimalloc's own
/// `mi_realloc_aligned` takes its plain path up to the same bound.
const PLAIN_ALIGN: usize = std::mem::size_of::<usize>();

fn plain(align: usize) -> bool {
    align <= PLAIN_ALIGN
}

// SAFETY: each call hands mimalloc a layout's size (and alignment when the plain entry
// point would not honour it); blocks from either entry point are freed by `mi_free`.
unsafe impl std::alloc::GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        use libmimalloc_sys::{mi_malloc, mi_malloc_aligned};
        let p = if plain(layout.align()) {
            unsafe { mi_malloc(layout.size()) as *mut u8 }
        } else {
            unsafe { mi_malloc_aligned(layout.size(), layout.align()) as *mut u8 }
        };
        debug_assert!(
            (p as usize).is_multiple_of(layout.align()),
            "{layout:?} at {p:?}"
        );
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        use libmimalloc_sys::{mi_zalloc, mi_zalloc_aligned};
        if plain(layout.align()) {
            unsafe { mi_zalloc(layout.size()) as *mut u8 }
        } else {
            unsafe { mi_zalloc_aligned(layout.size(), layout.align()) as *mut u8 }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: std::alloc::Layout) {
        unsafe { libmimalloc_sys::mi_free(ptr.cast()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        use libmimalloc_sys::{mi_realloc, mi_realloc_aligned};
        if plain(layout.align()) {
            unsafe { mi_realloc(ptr.cast(), new_size) as *mut u8 }
        } else {
            unsafe { mi_realloc_aligned(ptr.cast(), new_size, layout.align()) as *mut u8 }
        }
    }
}

unsafe extern "C" {
    /// mimalloc's own (linked with the allocator above): the calling thread's freed pages
    /// back to the system now (`force`), not at the next use of its heap.
    fn mi_collect(force: bool);
}

/// Installed for the worker threads (`chainedge::heap_tidy`).
fn give_back_freed_pages() {
    // SAFETY: a plain call into the allocator, valid on any thread at any time.
    unsafe { mi_collect(true) }
}

use pingora_core::server::configuration::Opt;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "chainedge",
    version,
    about = "Edge data plane for blockchain node fleets"
)]
struct Cli {
    /// Pingora's own flags: -c server YAML, -d daemon, -u upgrade, -t test configuration.
    #[command(flatten)]
    pingora: Opt,

    /// The app configuration (listeners, pools, plans, store, plugins directory), e.g.
    /// `conf/demo.yaml` or `/etc/chainedge/chainedge.yaml`. Required: there is no
    /// default file, so a server never starts on a config nobody chose.
    #[arg(long = "app", env = "CHAINEDGE_APP", global = true)]
    app: Option<PathBuf>,

    #[command(subcommand)]
    command: Option<cli::Command>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();

    // A CLI command works on the store alone: serving secrets are not read for it.
    let purpose = match cli.command {
        Some(_) => chainedge::config::Purpose::Operate,
        None => chainedge::config::Purpose::Serve,
    };
    let loaded = match app::load(cli.pingora.conf.as_deref(), cli.app.as_deref(), purpose) {
        Ok(l) => l,
        Err(errors) => {
            for e in &errors {
                eprintln!("chainedge: {e}");
            }
            eprintln!(
                "chainedge: configuration invalid ({} problem(s))",
                errors.len()
            );
            return ExitCode::from(2);
        }
    };
    if let Some(cli::Command::Openapi { strict }) = &cli.command {
        return cli::openapi(&loaded, *strict);
    }
    if let Some(cmd) = &cli.command {
        return cli::run(cmd, &loaded.app);
    }
    if cli.pingora.test {
        println!(
            "chainedge: configuration OK ({} routes from {}, app config {})",
            loaded.matcher.routes().len(),
            loaded.app.plugins_dir.display(),
            loaded.app.path.display()
        );
        print!("{}", cli::method_table(&loaded.app));
        for advice in loaded.app.advice() {
            eprintln!("chainedge: warning: {advice}");
        }
        return ExitCode::SUCCESS;
    }
    chainedge::heap_tidy::install(give_back_freed_pages);
    match app::serve(cli.pingora, loaded) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chainedge: {e}");
            ExitCode::from(1)
        }
    }
}
