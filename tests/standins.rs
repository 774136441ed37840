//! Every upstream stand-in (`tests/standins/`) held to its system's official spec,
//! vendored under `tests/standins/vendor/` (see its README): `validate.py` asks each
//! stand-in what the edge asks and checks each answer against the spec's schema, and
//! first checks that the checks refuse answers the specs refuse.

use common::run_python;

#[test]
fn every_stand_in_answers_as_its_official_spec_says() {
    // The beacon stand-in's light-client data follows a real execution node's blocks.
    let node = common::Anvil::start(1, &["--block-time", "1"]);
    let said = run_python("tests/standins/validate.py", &["--el", &node.url()]);
    assert!(
        said.contains("ok   beacon light_client finality_update"),
        "{said}"
    );
    assert!(
        said.contains("the checks refuse what the specs refuse"),
        "{said}"
    );
    assert!(
        said.lines().filter(|l| l.starts_with("ok ")).count() >= 57,
        "{said}"
    );
}
