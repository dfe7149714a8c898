use super::*;

#[test]
fn placeholder_roundtrip() {
    let json = r#"{"ir_version":1,"name":"t","parameters":[{"name":"mu"}],"model":[{"sample":{"value":"mu","dist":{"normal":{"mu":0,"sigma":{"exp":{"add":[1,"mu"]}}}}}}]}"#;
    let model = Model::from_json(json).unwrap();
    assert_eq!(Model::from_json(&model.to_json()).unwrap(), model);
    assert_eq!(
        Model::from_msgpack(&model.to_msgpack(), 1 << 20).unwrap(),
        model
    );
}
