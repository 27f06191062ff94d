//! The gateway config parser and validator (`PUT /v1/config`, `perigee config check`) on any
//! text: an error naming a field, or a config that every renderer takes without panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;
use perigee::gateway::{config, render};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match config::parse(text) {
        Ok(cfg) => {
            let rendered = render::render(&cfg, &["hybla".to_string(), "cubic".to_string()]);
            assert!(rendered.nft.contains("table inet perigee"));
            if cfg.cache.enabled {
                let served =
                    perigee_squid::check_served_subnets(&cfg.served_subnets, &cfg.served_limits)
                        .expect("validated served subnets pass again");
                let paths = perigee_squid::SquidPaths::default();
                let _ = perigee_squid::render(
                    &cfg.cache,
                    &served,
                    &cfg.squid_nameservers(),
                    &paths,
                    None,
                );
            }
        }
        // The message goes back to the API, which shows it: never empty.
        Err(e) => assert!(
            !e.message.is_empty(),
            "an empty error for field {:?}",
            e.field
        ),
    }
});
