"""Scenario fields that name a member of a plug-in registry, with the member's parameters.

:class:`RegistryUnion` is the ``Annotated`` metadata of such a field (``routing``, a class's
``arrivals``): a discriminated union whose members are read from the registry *when a scenario
is validated or its schema generated*, so registering a member (one call, in the family's module)
is the only step to make it valid in a scenario, in ``fleetplan schema`` and in the docs. A value
is a mapping with the tag (``{policy: slo-aware}``) or, where the family allows it, the bare name
(``least-outstanding``); an unknown name fails with the valid ones; the member's own model checks
the parameters (strict, unknown fields refused).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, ValidationError, core_schema


class RegistryUnion:
    """Validate (and describe) a field against ``members()``: name -> member model.

    ``tag``: the field of each member that holds its name. ``kind``: what a member is called in
    messages (``routing policy``). ``shorthand``: the bare name stands for the member with
    default parameters (and a member with only defaults is written back as its name).
    """

    def __init__(self, *, tag: str, kind: str, members: Callable[[], Mapping[str, type[BaseModel]]],
                 shorthand: bool) -> None:
        self.tag, self.kind, self.members, self.shorthand = tag, kind, members, shorthand

    def _unknown(self, name: Any) -> ValidationError:
        valid = ", ".join(sorted(self.members()))
        err = PydanticCustomError("unknown_member", "unknown {kind} {name} (valid: {valid})",
                                  {"kind": self.kind, "name": str(name), "valid": valid})
        return ValidationError.from_exception_data(
            self.kind, [{"type": err, "loc": (self.tag,), "input": name}])

    def validate(self, value: Any) -> BaseModel:
        members = self.members()
        if isinstance(value, BaseModel) and type(value) in members.values():
            return value
        if self.shorthand and isinstance(value, str):
            value = {self.tag: value}
        if not isinstance(value, dict):
            form = "a name or " if self.shorthand else ""
            article = "an" if self.kind[:1] in "aeiou" else "a"
            raise PydanticCustomError(
                "member_type", "{article} {kind} is {form}a mapping with `{tag}` (valid: {valid})",
                {"article": article, "kind": self.kind, "form": form, "tag": self.tag,
                 "valid": ", ".join(sorted(members))})
        name = value.get(self.tag)
        if name is None:
            raise PydanticCustomError(
                "member_missing", "give `{tag}` (valid: {valid})",
                {"tag": self.tag, "valid": ", ".join(sorted(members))})
        if not isinstance(name, str) or name not in members:
            raise self._unknown(name)
        member = members[name]
        fields = list(member.model_fields)
        for key in value:
            if key not in fields:
                err = PydanticCustomError(
                    "unknown_param", "unknown field of {name} (valid: {valid})",
                    {"name": name, "valid": ", ".join(fields)})
                raise ValidationError.from_exception_data(
                    self.kind, [{"type": err, "loc": (key,), "input": value[key]}])
        return member.model_validate(value)

    def serialize(self, value: BaseModel, info: core_schema.SerializationInfo) -> Any:
        data = value.model_dump(mode=info.mode, by_alias=True, exclude_unset=info.exclude_unset,
                                exclude_defaults=info.exclude_defaults)
        if self.shorthand and value.model_dump(exclude_defaults=True).keys() <= {self.tag}:
            return getattr(value, self.tag)
        data[self.tag] = getattr(value, self.tag)
        return data

    def __get_pydantic_core_schema__(self, source: Any,
                                     handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            self.validate, serialization=core_schema.plain_serializer_function_ser_schema(
                self.serialize, info_arg=True))

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        members = self.members()
        names = sorted(members)
        options: list[JsonSchemaValue] = []
        if self.shorthand:
            options.append({"type": "string", "enum": names,
                            "description": f"the {self.kind} by name, with its defaults"})
        # through the generator itself (not ``handler``), so each member becomes a ``$defs``
        # record referenced here, as pydantic does for the members of its own unions
        generate = getattr(handler, "generate_json_schema", None)
        inner = generate.generate_inner if generate is not None else handler
        refs = {n: inner(members[n].__pydantic_core_schema__) for n in names}
        options += refs.values()
        out: JsonSchemaValue = {"oneOf": options}
        mapping = {n: r["$ref"] for n, r in refs.items() if "$ref" in r}
        if len(mapping) == len(refs) and not self.shorthand:
            out["discriminator"] = {"propertyName": self.tag, "mapping": mapping}
        return out
