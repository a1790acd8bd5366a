compile pmanual_axis_index_data2_model4.hlo --mesh data=2,model=4 -o /dev/null
