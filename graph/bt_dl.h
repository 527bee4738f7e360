/* SPDX-License-Identifier: Apache-2.0 */
/*
 * graph/bt_dl.[ch] — libbabeltrace2, opened on first use instead of linked.
 *
 * Linked, libbabeltrace2 and GLib are mapped and relocated at every start of `weft`, including
 * every `weft run`, which never reads a CTF trace (docs/performance.md, "Start-up again").  So
 * the CTF readers (graph/ctf_read.c, graph/import_ctf.c, vm/ctf.c) include this header instead
 * of <babeltrace2/babeltrace.h>: the types and constants are babeltrace2's, and each function
 * they call is a pointer of its own type in `weft_bt`, filled with dlsym() by weft_bt_load(),
 * which ctf_read_plugins() calls before anything of babeltrace2 is used (every reading starts
 * there).  A function added to the readers must be added to WEFT_BT_FUNCS and to the names
 * below (the build fails at link time otherwise).  babeltrace2's static inline functions
 * that call the library (bt_value_is_string()) would bypass the table: the readers do not
 * use them.
 */
#ifndef WEFT_GRAPH_BT_DL_H
#define WEFT_GRAPH_BT_DL_H
#include <stddef.h>

#include <babeltrace2/babeltrace.h>

#define WEFT_BT_SONAME "libbabeltrace2.so.0"

#define WEFT_BT_FUNCS(X)                                                  \
	X(bt_clock_class_origin_is_unix_epoch)                            \
	X(bt_clock_snapshot_get_ns_from_origin)                           \
	X(bt_component_filter_borrow_input_port_by_index_const)           \
	X(bt_component_filter_borrow_output_port_by_name_const)           \
	X(bt_component_sink_borrow_input_port_by_index_const)             \
	X(bt_component_source_borrow_output_port_by_index_const)          \
	X(bt_component_source_get_output_port_count)                      \
	X(bt_current_thread_clear_error)                                  \
	X(bt_current_thread_take_error)                                   \
	X(bt_error_borrow_cause_by_index)                                 \
	X(bt_error_cause_get_message)                                     \
	X(bt_error_get_cause_count)                                       \
	X(bt_error_release)                                               \
	X(bt_event_borrow_class_const)                                    \
	X(bt_event_borrow_common_context_field_const)                     \
	X(bt_event_borrow_packet_const)                                   \
	X(bt_event_borrow_payload_field_const)                            \
	X(bt_event_borrow_stream_const)                                   \
	X(bt_event_class_get_name)                                        \
	X(bt_field_array_borrow_element_field_by_index_const)             \
	X(bt_field_array_get_length)                                      \
	X(bt_field_bit_array_get_value_as_integer)                        \
	X(bt_field_bool_get_value)                                        \
	X(bt_field_borrow_class_const)                                    \
	X(bt_field_class_structure_borrow_member_by_index_const)          \
	X(bt_field_class_structure_get_member_count)                      \
	X(bt_field_class_structure_member_get_name)                       \
	X(bt_field_get_class_type)                                        \
	X(bt_field_integer_signed_get_value)                              \
	X(bt_field_integer_unsigned_get_value)                            \
	X(bt_field_option_borrow_field_const)                             \
	X(bt_field_real_double_precision_get_value)                       \
	X(bt_field_real_single_precision_get_value)                       \
	X(bt_field_string_get_length)                                     \
	X(bt_field_string_get_value)                                      \
	X(bt_field_structure_borrow_member_field_by_index_const)          \
	X(bt_field_structure_borrow_member_field_by_name_const)           \
	X(bt_field_variant_borrow_selected_option_field_const)            \
	X(bt_graph_add_filter_component)                                  \
	X(bt_graph_add_simple_sink_component)                             \
	X(bt_graph_add_source_component)                                  \
	X(bt_graph_connect_ports)                                         \
	X(bt_graph_create)                                                \
	X(bt_graph_put_ref)                                               \
	X(bt_graph_run)                                                   \
	X(bt_message_discarded_events_get_count)                          \
	X(bt_message_event_borrow_default_clock_snapshot_const)           \
	X(bt_message_event_borrow_event_const)                            \
	X(bt_message_event_borrow_stream_class_default_clock_class_const) \
	X(bt_message_get_type)                                            \
	X(bt_message_iterator_next)                                       \
	X(bt_message_put_ref)                                             \
	X(bt_packet_borrow_context_field_const)                           \
	X(bt_plugin_borrow_filter_component_class_by_name_const)          \
	X(bt_plugin_borrow_source_component_class_by_name_const)          \
	X(bt_plugin_find)                                                 \
	X(bt_stream_borrow_trace_const)                                   \
	X(bt_trace_borrow_environment_entry_value_by_name_const)          \
	X(bt_value_array_append_string_element)                           \
	X(bt_value_get_type)                                              \
	X(bt_value_map_create)                                            \
	X(bt_value_map_insert_empty_array_entry)                          \
	X(bt_value_put_ref)                                               \
	X(bt_value_string_get)

struct weft_bt_fns {
#define WEFT_BT_MEMBER(n) __typeof__(n) *n;
	WEFT_BT_FUNCS(WEFT_BT_MEMBER)
#undef WEFT_BT_MEMBER
};
extern struct weft_bt_fns weft_bt;

/* Opens libbabeltrace2 if it is not yet open (once a process, thread-safe): 0, or -ELIBACC
 * with the reason in why[0..sz). */
int weft_bt_load(char *why, size_t sz);

#ifndef WEFT_BT_DL_IMPL
#define bt_clock_class_origin_is_unix_epoch (*weft_bt.bt_clock_class_origin_is_unix_epoch)
#define bt_clock_snapshot_get_ns_from_origin (*weft_bt.bt_clock_snapshot_get_ns_from_origin)
#define bt_component_filter_borrow_input_port_by_index_const \
	(*weft_bt.bt_component_filter_borrow_input_port_by_index_const)
#define bt_component_filter_borrow_output_port_by_name_const \
	(*weft_bt.bt_component_filter_borrow_output_port_by_name_const)
#define bt_component_sink_borrow_input_port_by_index_const \
	(*weft_bt.bt_component_sink_borrow_input_port_by_index_const)
#define bt_component_source_borrow_output_port_by_index_const \
	(*weft_bt.bt_component_source_borrow_output_port_by_index_const)
#define bt_component_source_get_output_port_count \
	(*weft_bt.bt_component_source_get_output_port_count)
#define bt_current_thread_clear_error (*weft_bt.bt_current_thread_clear_error)
#define bt_current_thread_take_error (*weft_bt.bt_current_thread_take_error)
#define bt_error_borrow_cause_by_index (*weft_bt.bt_error_borrow_cause_by_index)
#define bt_error_cause_get_message (*weft_bt.bt_error_cause_get_message)
#define bt_error_get_cause_count (*weft_bt.bt_error_get_cause_count)
#define bt_error_release (*weft_bt.bt_error_release)
#define bt_event_borrow_class_const (*weft_bt.bt_event_borrow_class_const)
#define bt_event_borrow_common_context_field_const \
	(*weft_bt.bt_event_borrow_common_context_field_const)
#define bt_event_borrow_packet_const (*weft_bt.bt_event_borrow_packet_const)
#define bt_event_borrow_payload_field_const (*weft_bt.bt_event_borrow_payload_field_const)
#define bt_event_borrow_stream_const (*weft_bt.bt_event_borrow_stream_const)
#define bt_event_class_get_name (*weft_bt.bt_event_class_get_name)
#define bt_field_array_borrow_element_field_by_index_const \
	(*weft_bt.bt_field_array_borrow_element_field_by_index_const)
#define bt_field_array_get_length (*weft_bt.bt_field_array_get_length)
#define bt_field_bit_array_get_value_as_integer (*weft_bt.bt_field_bit_array_get_value_as_integer)
#define bt_field_bool_get_value (*weft_bt.bt_field_bool_get_value)
#define bt_field_borrow_class_const (*weft_bt.bt_field_borrow_class_const)
#define bt_field_class_structure_borrow_member_by_index_const \
	(*weft_bt.bt_field_class_structure_borrow_member_by_index_const)
#define bt_field_class_structure_get_member_count \
	(*weft_bt.bt_field_class_structure_get_member_count)
#define bt_field_class_structure_member_get_name (*weft_bt.bt_field_class_structure_member_get_name)
#define bt_field_get_class_type (*weft_bt.bt_field_get_class_type)
#define bt_field_integer_signed_get_value (*weft_bt.bt_field_integer_signed_get_value)
#define bt_field_integer_unsigned_get_value (*weft_bt.bt_field_integer_unsigned_get_value)
#define bt_field_option_borrow_field_const (*weft_bt.bt_field_option_borrow_field_const)
#define bt_field_real_double_precision_get_value (*weft_bt.bt_field_real_double_precision_get_value)
#define bt_field_real_single_precision_get_value (*weft_bt.bt_field_real_single_precision_get_value)
#define bt_field_string_get_length (*weft_bt.bt_field_string_get_length)
#define bt_field_string_get_value (*weft_bt.bt_field_string_get_value)
#define bt_field_structure_borrow_member_field_by_index_const \
	(*weft_bt.bt_field_structure_borrow_member_field_by_index_const)
#define bt_field_structure_borrow_member_field_by_name_const \
	(*weft_bt.bt_field_structure_borrow_member_field_by_name_const)
#define bt_field_variant_borrow_selected_option_field_const \
	(*weft_bt.bt_field_variant_borrow_selected_option_field_const)
#define bt_graph_add_filter_component (*weft_bt.bt_graph_add_filter_component)
#define bt_graph_add_simple_sink_component (*weft_bt.bt_graph_add_simple_sink_component)
#define bt_graph_add_source_component (*weft_bt.bt_graph_add_source_component)
#define bt_graph_connect_ports (*weft_bt.bt_graph_connect_ports)
#define bt_graph_create (*weft_bt.bt_graph_create)
#define bt_graph_put_ref (*weft_bt.bt_graph_put_ref)
#define bt_graph_run (*weft_bt.bt_graph_run)
#define bt_message_discarded_events_get_count (*weft_bt.bt_message_discarded_events_get_count)
#define bt_message_event_borrow_default_clock_snapshot_const \
	(*weft_bt.bt_message_event_borrow_default_clock_snapshot_const)
#define bt_message_event_borrow_event_const (*weft_bt.bt_message_event_borrow_event_const)
#define bt_message_event_borrow_stream_class_default_clock_class_const \
	(*weft_bt.bt_message_event_borrow_stream_class_default_clock_class_const)
#define bt_message_get_type (*weft_bt.bt_message_get_type)
#define bt_message_iterator_next (*weft_bt.bt_message_iterator_next)
#define bt_message_put_ref (*weft_bt.bt_message_put_ref)
#define bt_packet_borrow_context_field_const (*weft_bt.bt_packet_borrow_context_field_const)
#define bt_plugin_borrow_filter_component_class_by_name_const \
	(*weft_bt.bt_plugin_borrow_filter_component_class_by_name_const)
#define bt_plugin_borrow_source_component_class_by_name_const \
	(*weft_bt.bt_plugin_borrow_source_component_class_by_name_const)
#define bt_plugin_find (*weft_bt.bt_plugin_find)
#define bt_stream_borrow_trace_const (*weft_bt.bt_stream_borrow_trace_const)
#define bt_trace_borrow_environment_entry_value_by_name_const \
	(*weft_bt.bt_trace_borrow_environment_entry_value_by_name_const)
#define bt_value_array_append_string_element (*weft_bt.bt_value_array_append_string_element)
#define bt_value_get_type (*weft_bt.bt_value_get_type)
#define bt_value_map_create (*weft_bt.bt_value_map_create)
#define bt_value_map_insert_empty_array_entry (*weft_bt.bt_value_map_insert_empty_array_entry)
#define bt_value_put_ref (*weft_bt.bt_value_put_ref)
#define bt_value_string_get (*weft_bt.bt_value_string_get)
#endif

#endif
